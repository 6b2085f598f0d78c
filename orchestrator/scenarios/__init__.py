"""Bundled scripted scenarios (package data) and the files each one starts from."""
