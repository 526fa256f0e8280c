"""What the tools in tools/ and framework.testing share: comparing, importing, their command line."""
