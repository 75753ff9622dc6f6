"""One task's search: the space of schedules, the strategies that pick what to measure, the cost
model and its features, and the driver that proposes and learns for whoever measures."""
