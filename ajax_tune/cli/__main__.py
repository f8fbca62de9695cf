"""`python -m ajax_tune.cli`: the `ajax-tune` command."""

from ajax_tune.cli.parser import entry

entry()
