"""Environments: vector envs, Atari preprocessing, and the EnvSpace they describe."""
