// ESLint (flat config) for the proxy's TypeScript and JavaScript: `npm run lint`, part of `npm test`.
// The recommended rules of ESLint and typescript-eslint (syntax-only, no type information, so the
// whole tree lints in seconds; `tsc --noEmit` does the type checking), less the few listed below,
// and a line-length limit. AssemblyScript (plugins/, sdk/assembly/, the test plugins) is not
// linted: its types (i32, usize, decorators on functions) are not TypeScript's.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';
import stylistic from '@stylistic/eslint-plugin';

export default tseslint.config(
  {
    ignores: [
      'node_modules/**', 'build/**', 'tmp/**', 'test-artifacts/**', 'native/**', 'examples/**', 'docs/**',
      'plugins/**', 'sdk/assembly/**', 'test/fixtures/plugins/**', 'test/sdk/bson-harness/assembly/**', '.scratch/**',
    ],
  },
  {
    files: [
      'runtime/**/*.{ts,js,mjs}', 'test/**/*.{ts,js,mjs}', 'bench/**/*.{ts,js,mjs}', 'scripts/**/*.{ts,mts,js,mjs}', 'sdk/**/*.{ts,js,mjs}',
      'eslint.config.js',
    ],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    plugins: { '@stylistic': stylistic },
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'module',
      globals: { ...globals.node },
    },
    rules: {
      // Parsed JSON and driver replies in tests, and a few host-boundary shapes, are typed `any` on purpose.
      '@typescript-eslint/no-explicit-any': 'off',
      // Tests match column-aligned CLI output, where the run of spaces is the thing checked.
      'no-regex-spaces': 'off',
      '@typescript-eslint/no-this-alias': 'off',
      '@typescript-eslint/ban-ts-comment': ['error', { 'ts-ignore': 'allow-with-description' }],
      // A `let` assigned once after the closures that read it are made (they run later).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true, destructuring: 'all' }],
      // Parameters keep their names for the reader (callbacks of a fixed signature); `_` marks a
      // binding kept on purpose.
      '@typescript-eslint/no-unused-vars': ['error', {
        args: 'none', caughtErrors: 'none', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true,
      }],
      '@stylistic/max-len': ['error', {
        code: 160, tabWidth: 2, ignoreUrls: true, ignoreRegExpLiterals: true,
      }],
      // The layout the tree is written in, applied by `npm run format` (eslint --fix).
      '@stylistic/semi': ['error', 'always'],
      '@stylistic/quotes': ['error', 'single', { avoidEscape: true, allowTemplateLiterals: 'always' }],
      '@stylistic/indent': ['error', 2, { SwitchCase: 1, flatTernaryExpressions: true, ignoredNodes: ['TemplateLiteral *'] }],
      '@stylistic/comma-dangle': ['error', 'always-multiline'],
      '@stylistic/comma-spacing': 'error',
      '@stylistic/keyword-spacing': 'error',
      '@stylistic/space-infix-ops': 'error',
      '@stylistic/space-before-blocks': 'error',
      '@stylistic/object-curly-spacing': ['error', 'always'],
      '@stylistic/arrow-parens': ['error', 'always'],
      '@stylistic/no-trailing-spaces': 'error',
      '@stylistic/eol-last': 'error',
      '@stylistic/no-multiple-empty-lines': ['error', { max: 1, maxEOF: 0 }],
    },
  },
  {
    // The dashboard runs in the browser.
    files: ['runtime/dashboard/**/*.js'],
    languageOptions: { sourceType: 'script', globals: { ...globals.browser, uPlot: 'readonly' } },
  },
);
