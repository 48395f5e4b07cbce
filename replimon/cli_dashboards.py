"""``replimon dashboards``: generate the Grafana dashboards and alert rules from code, and push
them to a Grafana over its HTTP API (docs/dashboards.md). Registered on the main command by
``replimon/cli.py``."""

from __future__ import annotations

from typing import Annotated

import typer

from replimon.console import err, fail, state

dashboards_app = typer.Typer(help="Grafana dashboards and alert rules as code (docs/dashboards.md).",
                             no_args_is_help=True, rich_markup_mode=None)


@dashboards_app.command("generate")
def dashboards_generate(
    check: Annotated[bool, typer.Option("--check", help="write nothing; exit 1 if a checked-in file differs from what the code generates")] = False,
) -> None:
    """Generate the dashboards' JSON and the alert rules' YAML from code, into dashboards/."""
    from replimon.dashboards.generate import generate

    changed = generate(check=check)
    for path in changed:
        err.print(f"{'differs' if check else 'wrote'}: {path}", highlight=False, markup=False)
    if check and changed:
        raise typer.Exit(1)


@dashboards_app.command("push")
def dashboards_push(
    url: Annotated[str, typer.Option("--url", envvar="GRAFANA_URL", help="Grafana's base URL, e.g. http://localhost:3000 [env GRAFANA_URL]")],
    token: Annotated[str, typer.Option("--token", envvar="GRAFANA_TOKEN", help="a service account token with the Admin role (datasources and alerting provisioning need it) [env GRAFANA_TOKEN]")],
    postgres_url: Annotated[str | None, typer.Option("--postgres-url", help="the PostgreSQL the datasource points at, as Grafana reaches it (host:port, or a postgresql:// URL) [default: from postgres.dsn]")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show what would change, change nothing")] = False,
) -> None:
    """Provision the datasource, dashboards, alert rules and contact point over Grafana's HTTP API
    (idempotent: a second push changes nothing)."""
    from replimon.dashboards.push import PushError, push

    try:
        report = push(url, token, state.settings(), postgres_url=postgres_url, dry_run=dry_run)
    except PushError as exc:
        raise fail(f"dashboards push: {exc}") from None
    for line in report.lines():
        print(line)
