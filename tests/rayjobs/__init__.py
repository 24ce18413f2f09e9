"""The Ray engine's tests: a package, so that its one Ray head (conftest's package-scoped
fixture) stops when these tests end, before any other test's preflight could see it."""
