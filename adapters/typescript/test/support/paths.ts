/** Where the tests find the contract's files, from the compiled test's own location. */

import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

/** The package's root: the compiled tests live in `build-test/test/support/`. */
export const PACKAGE_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** `spec/` of the repository, two levels above the package. */
export const SPEC_DIR = path.resolve(PACKAGE_ROOT, "../../spec");

/** The conformance vectors. */
export const VECTORS_DIR = path.join(SPEC_DIR, "vectors");

/** Reads a JSON file. */
export function readJson(file: string): unknown {
  return JSON.parse(readFileSync(file, "utf8"));
}

/** The vector files, in name order. */
export function vectorFiles(): string[] {
  return readdirSync(VECTORS_DIR)
    .filter((name) => name.endsWith(".json"))
    .sort();
}
