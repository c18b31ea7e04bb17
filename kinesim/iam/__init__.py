"""IAM: roles, users, groups, access keys, instance profiles and their policies, stored and
answered as AWS does.

Nothing here is enforced: kinesim checks no permissions, so a policy is a document kept for the
client to read back (the tutorials' `aws iam create-role` / `attach-role-policy`, the roles a
stack makes). A user's Active access keys do sign requests (`principals.py`: `--verify-signatures`
accepts them, STS answers for them as the user). IAM is global: its entities belong to the
account, not to a region.
"""
