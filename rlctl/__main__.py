"""``python -m rlctl`` runs the CLI."""

from rlctl.cli.app import main

if __name__ == "__main__":
    main()
