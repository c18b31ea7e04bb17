// A CloudFormation custom resource's ResponseURL, reached as providers' code reaches it on AWS.
// There it is a presigned https:// S3 URL, and the CDK's Node.js handlers
// (aws-cdk-lib/custom-resource-handlers: `https.request({ hostname, path, method: 'PUT' })`) and
// AWS's cfn-response module (`https.request({ hostname, port: 443, path })`) take only its host
// and path: the answer goes to port 443 over TLS. kinesim's ResponseURL is a plain-HTTP route of
// the server (kinesim/cloudformation/custom_responses.py), so an https request for that route on
// the server's host is sent there over http, to the server's port. Nothing else is changed: other
// https requests, the http module and fetch() (which takes the URL as it is) are left alone.
import http from 'node:http';
import https from 'node:https';
import module from 'node:module';

const ROUTE = '/_kinesim/cloudformation/responses/';
const bare = (host) => String(host || '').replace(/^\[(.*)\]$/, '$1');

// The request's fields when it is for the response route on `server`'s host, else null.
// https.request(url[, options][, callback]) or https.request(options[, callback]).
function forRoute(server, [first, second]) {
  let fields = null;
  if (typeof first === 'string' || first instanceof URL) {
    let url;
    try {
      url = new URL(first);
    } catch {
      return null;
    }
    fields = { hostname: url.hostname, path: url.pathname + url.search };
    if (second && typeof second === 'object') fields = { ...fields, ...second };
  } else if (first && typeof first === 'object') {
    fields = first;
  }
  if (!fields) return null;
  const host = fields.hostname || String(fields.host || '').replace(/:\d+$/, '');
  return bare(host) === bare(server.hostname) && String(fields.path || '').startsWith(ROUTE) ? fields : null;
}

export function routeResponses(endpointUrl) {
  let server;
  try {
    server = new URL(endpointUrl);
  } catch {
    return; // no server to route to
  }
  const original = https.request;
  const request = (...args) => {
    const fields = forRoute(server, args);
    if (!fields) return original.apply(https, args);
    const { method, headers, timeout, signal, path } = fields;
    const callback = args.find((arg) => typeof arg === 'function');
    return http.request({ hostname: bare(server.hostname), port: server.port || 80, path, method, headers, timeout,
      signal }, callback);
  };
  https.request = request;
  https.get = (...args) => {
    const req = request(...args);
    req.end();
    return req;
  };
  module.syncBuiltinESMExports(); // `import { request } from 'https'` sees it too
}
