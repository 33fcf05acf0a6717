"""The client's version (sent in User-Agent, shown by `almanac --version`)."""

VERSION = "0.1.0"
