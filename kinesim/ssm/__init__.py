"""AWS Systems Manager Parameter Store (the parameters part of SSM): AWS JSON 1.1, `AmazonSSM.*`."""
