"""Spark sessions, brokers and pipelines for the Spark tests and bench."""
