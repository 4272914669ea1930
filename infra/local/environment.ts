/**
 * Imported first by the local entry points: completes the environment with the local defaults before any
 * module that reads it at import (the logger, the handlers' configuration) is evaluated.
 */
import { applyLocalDefaults } from '../../functions/runtime/local-stack-defaults';

applyLocalDefaults();
