"""`kinesim deploy`: a CloudFormation / SAM template turned into kinesim resources.

The steps, one module each:
- template.py: read the YAML or JSON (short-form intrinsics included) and lint it with cfn-lint;
- sam.py: apply the `AWS::Serverless-2016-10-31` transform with aws-sam-translator;
- intrinsics.py: Ref, Fn::GetAtt, Fn::Sub, ... and Conditions, resolved as CloudFormation does;
- resources.py: one handler per supported resource type, calling the service APIs with boto3;
- stack.py: the plan (dependency order, create / update / replace / delete) and its application,
  with the stack's state kept on the kinesim server;
- cli.py: the `kinesim deploy` command.

Everything goes through the same APIs a client uses: a deployed stack is indistinguishable from
one made by hand with boto3.
"""
