// cfn-response: what CloudFormation puts beside inline Node.js code (`Code: ZipFile`) for custom
// resource providers, with AWS's interface: send(event, context, responseStatus, responseData,
// physicalResourceId, noEcho) PUTs the answer to the request's ResponseURL over https (port 443)
// and then ends the invocation with context.done(). kinesim's own implementation of that interface.
exports.SUCCESS = 'SUCCESS';
exports.FAILED = 'FAILED';

exports.send = function send(event, context, responseStatus, responseData, physicalResourceId, noEcho) {
  return new Promise((resolve) => {
    const body = JSON.stringify({
      Status: responseStatus,
      Reason: 'See the details in CloudWatch Log Stream: ' + context.logStreamName,
      PhysicalResourceId: physicalResourceId || context.logStreamName,
      StackId: event.StackId,
      RequestId: event.RequestId,
      LogicalResourceId: event.LogicalResourceId,
      NoEcho: noEcho || false,
      Data: responseData,
    });
    console.log('Response body:\n', body);
    const url = new URL(event.ResponseURL);
    const request = require('https').request({
      hostname: url.hostname,
      port: 443,
      path: url.pathname + url.search,
      method: 'PUT',
      headers: { 'content-type': '', 'content-length': Buffer.byteLength(body) },
    }, (response) => {
      console.log('Status code: ' + response.statusCode);
      response.resume();
      response.on('end', () => { if (typeof context.done === 'function') context.done(); resolve(); });
    });
    request.on('error', (error) => {
      console.log('send(..) failed executing https.request(..): ' + error);
      if (typeof context.done === 'function') context.done();
      resolve();
    });
    request.write(body);
    request.end();
  });
};
