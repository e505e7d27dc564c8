import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules', 'data', 'dist', 'bench/out', 'bin', 'console/src/schema.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  // Plain JavaScript outside the TypeScript project (a worker thread's entry): linted without type information.
  {
    files: [
      'eslint.config.js',
      'vitest.config.ts',
      'console/vite.config.ts',
      'src/**/*.mjs',
      'scripts/**/*.mjs',
      'console/public/*.js',
    ],
    ...tseslint.configs.disableTypeChecked,
  },
  // The console's service worker: a plain script the browser runs in its worker scope.
  {
    files: ['console/public/*.js'],
    languageOptions: {
      globals: {
        self: 'readonly',
        caches: 'readonly',
        fetch: 'readonly',
        Response: 'readonly',
        URL: 'readonly',
        Promise: 'readonly',
      },
    },
  },
  // Build scripts run by plain Node.js.
  {
    files: ['scripts/**/*.mjs'],
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', fetch: 'readonly', setTimeout: 'readonly' },
    },
  },
);
