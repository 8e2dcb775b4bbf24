from interp_harvest.cli import main

raise SystemExit(main())
