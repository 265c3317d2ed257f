// A Stryker "ignorer" plugin: code in the mutated folders that no behaviour depends on, so a
// mutant of it cannot be killed by any test worth writing. Each rule names its reason; Stryker
// reports these mutants as "Ignored" with that reason (they do not count in the score).
import { PluginKind, declareValuePlugin } from '@stryker-mutator/api/plugin';

const TEST_SUPPORT_FUNCTIONS = /^(?:[A-Z_]+_EVENT_CASES|taskEventCases|serialize\w+ForGraph)$/;

export const strykerPlugins = [
  declareValuePlugin(PluginKind.Ignore, 'ccweb-test-support', {
    shouldIgnore(path) {
      // Human-readable state and machine descriptions (shown by the visualizer, never read by code).
      if (path.isObjectProperty() && !path.node.computed && path.node.key.type === 'Identifier' && path.node.key.name === 'description') {
        return 'description text: documentation for the visualizer, no behaviour';
      }
      // Sample events and graph serializations for model-based tests: test support kept next to its
      // machine; changing them changes what the tests try, not what the service does.
      if (path.isFunctionDeclaration() && path.node.id && TEST_SUPPORT_FUNCTIONS.test(path.node.id.name)) {
        return 'model-test support (sample events / graph serialization), not service behaviour';
      }
      // Placeholder actor logic in machines/, always replaced by src/ through machine.provide().
      if (path.isStringLiteral() && path.node.value.startsWith('not provided: ')) {
        return 'placeholder actor, replaced through machine.provide()';
      }
      return undefined;
    },
  }),
];
