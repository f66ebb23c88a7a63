package dev.peregrine.config;

/** {@code --log-level}, with Python's and uvicorn's names. */
public enum LogLevel { debug, info, warning, error, silent }
