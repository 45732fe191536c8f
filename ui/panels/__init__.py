"""Panels that two pages draw (the Report and Explore): the data map and PVI, the
why-removed slices, the removal rate by column, the label issues. They live below the pages
(``ui/`` layer 10 in docs/architecture.md), so no page package imports another."""
