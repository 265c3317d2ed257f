export {
  ConfigError,
  DEFAULT_CONFIG_FILE,
  defaultNodeId,
  REDACTED,
  SECRET_KEYS,
  bundledCodexCommand,
  configPathFromArgv,
  loadConfig,
  redactConfig,
  secretValues,
  type Config,
  type LoadConfigOptions,
} from './load-config.js';
export { CONFIG_KEYS, DEFAULTS, KEYS, LOG_LEVELS, type ConfigKey, type LogLevel } from './keys.js';
