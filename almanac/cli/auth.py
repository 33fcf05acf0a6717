"""`almanac auth setup|status`: store a profile, and check who the token is."""

from __future__ import annotations

import click

from almanac.cli.base import OUTPUTS, Cli, connected
from almanac.cli.config import DEFAULT_PROFILE, profiles_path, refuse_empty, write_profile
from almanac.cli.output import emit, table


@click.group("auth")
def auth() -> None:
    """Profiles of connection settings."""


@auth.command("setup")
# The same variables as every command reads: ALMANAC_PROFILE=ci wrote the `default` profile.
@click.option(
    "--url", envvar="ALMANAC_URL", required=True, help="Server URL, e.g. http://127.0.0.1:8000."
)
@click.option(
    "--token",
    envvar="ALMANAC_TOKEN",
    required=True,
    help="An API token (flask --app wsgi tokens create) [env ALMANAC_TOKEN].",
)
@click.option("--namespace", "-n", envvar="ALMANAC_NAMESPACE", default="default", show_default=True)
@click.option("--profile", envvar="ALMANAC_PROFILE", default=DEFAULT_PROFILE, show_default=True)
# Like every command, so a script can pass one -o everywhere; the token is never printed.
@click.option("--output", "-o", type=click.Choice(OUTPUTS), default="table", show_default=True)
def setup(url: str, token: str, namespace: str, profile: str, output: str) -> None:
    """Write a profile to profiles.toml (mode 0600); other commands read it."""
    # Checked as every command will check them, so no profile is saved that none could use.
    from almanac.errors import ConnectionFailed
    from almanac.operations import segment
    from almanac.transport import http_options

    refuse_empty({"--url": url, "--token": token, "--namespace": namespace, "--profile": profile})
    try:
        http_options(url, token, 30.0, "cli")
        # A namespace no request can name ('a/b') made every later command a usage error.
        segment(namespace, "namespace")
    except (ValueError, ConnectionFailed) as exc:
        raise click.UsageError(getattr(exc, "message", str(exc))) from exc
    path = profiles_path()
    write_profile(path, profile, {"url": url, "token": token, "namespace": namespace})
    written = {"profile": profile, "path": str(path), "url": url, "namespace": namespace}
    emit(output, written, lambda _: click.echo(f"profile {profile!r} written to {path}"))


@auth.command("status")
@connected
def status(cli: Cli) -> None:
    """Call the server and show who the token belongs to, and your namespaces."""
    me = cli.client.me()

    def show(body: dict) -> None:  # type: ignore[type-arg]
        kind = " (superuser)" if body.get("superuser") else ""
        click.echo(f"{cli.client.url}: signed in as {body.get('username')}{kind}")
        click.echo(f"namespace in use: {cli.client.namespace}")
        table(
            body.get("namespaces", []),
            [("Namespace", lambda n: n["name"]), ("Role", lambda n: n["role"])],
        )

    emit(cli.output, me.raw, show)
