#!/usr/bin/env bash
# Installs what building and testing lucce needs beyond the Rust toolchain: a JDK with javac
# (the agent's runtime class and the JVM tests are compiled with it). Idempotent.
set -euo pipefail
if ! command -v javac >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless
fi
