"""Why did a run stop? A verdict from the box's records and evidence, with what was ruled out."""
