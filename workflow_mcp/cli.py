"""`workflow-mcp`: the service's commands, the publisher's `publish` and the Gateway's `gateway`.

The console script and `python -m runtime.cli` (its historical name) both run main here. Every
command loads the one configuration document, the service's sections with the Gateway's
(gateway.settings.GatewayConfig).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gateway.command import add_gateway_parser, apply_arguments, run_gateway
from gateway.settings import GatewayConfig
from publisher.command import add_publish_parser, run_publish
from runtime.composition import cli as service
from runtime.composition.bootstrap import apply_dev_identity
from runtime.composition.config import load_settings
from runtime.publication import policy_from_settings
from workflow_mcp.lightspeed import add_lightspeed_parser


def publish(args: argparse.Namespace) -> int:
    """Publish a directory of definitions and Tool specs (publisher.command)."""
    settings = load_settings(args.config, document=GatewayConfig) if args.config else None
    destinations = (
        None if settings is None else policy_from_settings(settings.publication.destinations)
    )
    return run_publish(args, destinations=destinations)


def gateway(args: argparse.Namespace) -> int:
    """Run the reference Gateway until interrupted."""
    settings = service.command_settings(args, GatewayConfig)
    apply_arguments(settings, args)
    return run_gateway(settings, apply_dev_identity(settings))


def _add_publish(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_publish_parser(commands)
    commands.choices["publish"].set_defaults(run=publish)


def _add_gateway(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_gateway_parser(commands)
    commands.choices["gateway"].set_defaults(run=gateway)


CLIENT_COMMANDS: tuple[service.AddCommand, ...] = (
    _add_publish,
    _add_gateway,
    add_lightspeed_parser,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every `workflow-mcp` command."""
    return service.build_parser(CLIENT_COMMANDS, GatewayConfig)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `workflow-mcp` (and `python -m runtime.cli`)."""
    return service.main(argv, extra=CLIENT_COMMANDS, document=GatewayConfig)


if __name__ == "__main__":
    raise SystemExit(main())
