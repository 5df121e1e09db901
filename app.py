"""privengine dashboard: the page config, then the navigation (Home, one page per registered mechanism, Runs,
Explore: :func:`ui.links.sections`) with the app's own menu (:mod:`ui.shell` says why it draws its own).

The page config comes before anything slow is imported, so even the first response after a start has the wide
layout.
"""

from ui import shell

shell.page_config()

from ui import links  # noqa: E402  (after the page config: it imports the engine's registry)

shell.navigation(links.sections()).run()
