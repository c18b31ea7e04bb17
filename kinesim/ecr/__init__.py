"""Amazon ECR, minimal: repositories and their settings (policies, lifecycle policy, tags), kept so
that templates declaring them (CDK's bootstrap stack) deploy. There is no registry: no image can be
pushed or pulled."""
