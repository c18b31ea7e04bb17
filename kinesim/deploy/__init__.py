"""`kinesim deploy`: a CloudFormation / SAM template turned into kinesim resources.

The steps, one module each:
- template.py: read the YAML or JSON (short-form intrinsics included), lint it with cfn-lint,
  inline `AWS::Include` snippets;
- sam.py: apply the `AWS::Serverless-2016-10-31` transform with aws-sam-translator;
- intrinsics.py: Ref, Fn::GetAtt, Fn::Sub, ... and Conditions, resolved as CloudFormation does;
- resources.py: one handler per supported resource type, calling the service APIs with boto3;
- validate.py: the whole template checked before anything is created, every problem named at once;
- stack.py: the plan (dependency order, create / update / replace / delete; plan.py) and its
  application, the stack's state saved before and after every call and its events recorded;
  rollback.py: a failed create or update rolled back, as CloudFormation does. The engine runs
  in the server, behind the CloudFormation API (kinesim.cloudformation);
- cli.py, client.py, package.py: the `kinesim deploy` command, a client of that API (it lints,
  builds and uploads the code, then creates and executes a change set).

Everything goes through the same APIs a client uses: a deployed stack is indistinguishable from
one made by hand with boto3.
"""
