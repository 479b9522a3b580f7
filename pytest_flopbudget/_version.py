"""The package version, in a leaf module: the backends stamp it on every Report and setuptools reads it from here
(`[tool.setuptools.dynamic]`), and neither has to import the package root, which imports the backends."""

__version__ = "1.0.0"
