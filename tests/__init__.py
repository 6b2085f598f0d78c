"""The test suite; files mirror the modules of the package."""
