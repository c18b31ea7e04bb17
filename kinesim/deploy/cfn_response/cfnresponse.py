"""cfnresponse: what CloudFormation puts beside inline Python code (`Code: ZipFile`) for custom
resource providers, with AWS's interface: `send(event, context, responseStatus, responseData,
physicalResourceId=None, noEcho=False, reason=None)` PUTs the answer to the request's ResponseURL.
kinesim's own implementation of that interface."""
import json
import urllib.request

SUCCESS = "SUCCESS"
FAILED = "FAILED"


def send(event, context, responseStatus, responseData, physicalResourceId=None, noEcho=False, reason=None):
    stream = getattr(context, "log_stream_name", "")
    body = json.dumps({
        "Status": responseStatus,
        "Reason": reason or "See the details in CloudWatch Log Stream: " + stream,
        "PhysicalResourceId": physicalResourceId or stream,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "NoEcho": noEcho,
        "Data": responseData,
    }).encode()
    print("Response body:\n" + body.decode())
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            print("Status code: " + str(response.status))
    except Exception as err:  # as AWS's module: a failed answer is logged, not raised
        print("send(..) failed executing request: " + str(err))
