// What index.html uses: the AWS SDK for JavaScript v3's Kinesis client, bundled for the browser by
// esbuild (`--platform=browser` picks the SDK's browser runtime config: the fetch request handler).
import * as sdk from "@aws-sdk/client-kinesis";

window.KinesisSDK = sdk;
