"""Reports: before/after tables shared by the HTML report and the dashboard, and the HTML report."""
