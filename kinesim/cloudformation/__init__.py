"""CloudFormation: stacks, change sets, events and exports, served as AWS's API (query protocol).

The deploy engine (kinesim.deploy) applies templates; this package is the service around it:
requests are checked and answered at once (a template that cannot deploy is a ValidationError,
a change set lists its changes), and each stack operation then runs in the background as on AWS,
its progress visible in DescribeStacks and DescribeStackEvents.

- records.py: what is kept (stacks, their events, change sets, deleted stacks) in the store;
- templates.py: a request's template (TemplateBody or TemplateURL), parameters, capabilities;
- changes.py: what a template would change, as a change set lists it;
- runner.py: stack operations in the background, through the engine, resumed after a restart;
- stack_api.py, changeset_api.py, events_api.py (DescribeEvents, ListHookResults): the operations;
  service.py: what they share; api.py: their table and the HTTP front.
"""
