"""Streamlit-only building blocks shared by the pages: services, config form, run panel, charts.

Nothing here trains anything: pages talk to the engine through the registry,
the job manager and the run store.
"""
