// The version lives with the configuration (src/config/version.ts): the service reports it too.
export { VERSION } from '../config/version.js';
