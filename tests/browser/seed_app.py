"""`--app tests.browser.seed_app`: the browser tests' app, declared into the default registries
(what an app module does on import), for the dashboard subprocess."""

from tests.browser.app_jobs import declare

declare()
