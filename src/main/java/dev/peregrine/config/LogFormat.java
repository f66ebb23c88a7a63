package dev.peregrine.config;

/** {@code --access-log-format}. */
public enum LogFormat { text, json }
