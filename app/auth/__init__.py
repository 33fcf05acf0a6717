"""Accounts, namespaces, memberships, API tokens and the grants each role holds."""
