"""Peregrine: an application server for ASGI and WSGI applications, embedding CPython in the JVM.

This package is the Python half of the server. The server itself (sockets, HTTP, TLS) is Java;
``peregrine._native`` is a module of built-in functions implemented in Java that the glue here calls.
"""
