// Firehose data transformation: each record upper-cased, one JSON line per record; records that
// say "drop" are Dropped, and ones that are not JSON fail (they go to the error prefix).
console.log('transform loaded');

exports.handler = async (event, context) => {
  const records = event.records.map((record) => {
    const text = Buffer.from(record.data, 'base64').toString('utf8');
    let item;
    try {
      item = JSON.parse(text);
    } catch (err) {
      return { recordId: record.recordId, result: 'ProcessingFailed', data: record.data };
    }
    if (item.action === 'drop') {
      return { recordId: record.recordId, result: 'Dropped', data: record.data };
    }
    const out = { ...item, name: String(item.name).toUpperCase(), by: context.functionName };
    return { recordId: record.recordId, result: 'Ok', data: Buffer.from(JSON.stringify(out) + '\n').toString('base64') };
  });
  console.log(`transformed ${records.length} records`);
  return { records };
};
