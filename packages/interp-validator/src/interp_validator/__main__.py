"""`python -m interp_validator` is `interp-validate`."""

from interp_validator.cli import main

raise SystemExit(main())
