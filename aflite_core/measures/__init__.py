"""Before/after measures of a run: KNN distances, projection, duplicates, baselines, inoculation."""
