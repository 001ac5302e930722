/** This implementation's name: its instrumentation scope and the first half of `provenance.adapter`. */
export const ADAPTER_NAME = "candor-adapter-typescript";

/** This implementation's version, the same as the package's. */
export const ADAPTER_PACKAGE_VERSION = "0.1.0";

/** The adapter and its version as every envelope's `provenance.adapter` records it. */
export const ADAPTER_VERSION = `${ADAPTER_NAME}/${ADAPTER_PACKAGE_VERSION}`;
