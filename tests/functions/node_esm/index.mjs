// An ES module handler (.mjs), as the Lambda console's default index.mjs.
import { NAME } from './helper.mjs';

const started = await Promise.resolve('top-level await works');

export const handler = async (event, context) => ({
  kind: 'esm', helper: NAME, started, requestId: context.awsRequestId, event,
});

export const callback = (event, context, callback) => callback(null, 'never');
