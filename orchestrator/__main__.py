"""Run the command-line interface as ``python -m orchestrator``."""

from orchestrator.cli import main

if __name__ == "__main__":
    main()
