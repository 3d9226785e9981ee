"""Web app for human grading and side-by-side annotation (``knockout serve``; extra ``web``)."""
