// Logs every record it is given: which records reach which function shows each filter at work.
export async function handler(event, context) {
  for (const rec of event.Records) {
    const decoded = Buffer.from(rec.kinesis.data, 'base64').toString('utf-8');
    console.log(`${rec.kinesis.partitionKey} record data: ${decoded}`);
  }
}
