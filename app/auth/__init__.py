"""Accounts (layer 3): users, passwords, API tokens, memberships, namespaces, roles and grants."""
