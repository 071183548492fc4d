"""One module per `dac` subcommand; `main` dispatches to them."""
