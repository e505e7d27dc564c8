import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { consoleTypes, schemaFile } from '../scripts/console-types.ts';

// The console's types (console/src/schema.d.ts) are generated from the OpenAPI document the service serves; an
// API change must regenerate them (`npm run console:types`), and then `npm run typecheck` checks the console
// against the API as it is.
describe("the console's types", () => {
  it('are what `npm run console:types` writes from /api/openapi.json', async () => {
    const current = readFileSync(schemaFile, 'utf8');
    const fresh = await consoleTypes();
    expect(current === fresh, 'console/src/schema.d.ts is stale: run `npm run console:types`').toBe(true);
  });
});
